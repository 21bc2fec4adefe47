/* The least an HTTP/1.1 keep-alive load generator can do on loopback, as the floor the tools
 * are held against (scripts/floor-http.sh): CONNS connections on one epoll instance, a fixed
 * GET per connection in a closed loop, responses counted by length, nothing else (no parsing
 * beyond the first response's head, no histogram, no timers).
 *
 *   http PORT CONNS SECONDS et     edge-triggered, each connection registered once; the next
 *                                  request is written as soon as its response is read (the
 *                                  system calls netblast makes: one read, one write)
 *   http PORT CONNS SECONDS wrk    level-triggered; after a response the connection waits for
 *                                  EPOLLOUT and the request is written on the next epoll_wait
 *                                  (wrk's pattern: two epoll_ctl calls more per request)
 *
 * Every response is taken to be as long as the first (a static page: nginx's heads do not
 * change length within a run). Prints responses per second. UA names the user-agent sent.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void interest(int ep, int op, int fd, unsigned events, int i) {
  struct epoll_event e = {.events = events, .data.u32 = (unsigned)i};
  epoll_ctl(ep, op, fd, &e);
}

int main(int argc, char **argv) {
  if (argc < 5) return 2;
  int port = atoi(argv[1]), n = atoi(argv[2]), wrk = !strcmp(argv[4], "wrk");
  double secs = atof(argv[3]);
  char req[512];
  const char *ua = getenv("UA");
  int rl = snprintf(req, sizeof req, "GET / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s%s\r\n", port,
                    ua ? ua : "", ua ? "\r\n" : "");
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  int ep = epoll_create1(0), *fd = calloc(n, sizeof(int));
  long *got = calloc(n, sizeof(long)), len = 0, done = 0;
  char buf[65536];
  for (int i = 0; i < n; i++) {
    int one = 1;
    fd[i] = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd[i], (void *)&a, sizeof a)) { perror("connect"); return 1; }
    fcntl(fd[i], F_SETFL, O_NONBLOCK);
    if (wrk) {
      interest(ep, EPOLL_CTL_ADD, fd[i], EPOLLOUT, i);
    } else {
      interest(ep, EPOLL_CTL_ADD, fd[i], EPOLLIN | EPOLLET, i);
      if (write(fd[i], req, rl) != rl) return 1;
    }
  }
  double t0 = now(), end = t0 + secs;
  struct epoll_event ev[256];
  while (now() < end) {
    int k = epoll_wait(ep, ev, 256, 100);
    for (int j = 0; j < k; j++) {
      int i = ev[j].data.u32, s = fd[i];
      if (ev[j].events & EPOLLOUT) {
        if (write(s, req, rl) != rl) return 1;
        interest(ep, EPOLL_CTL_MOD, s, EPOLLIN, i);
        continue;
      }
      ssize_t r;
      while ((r = read(s, buf, sizeof buf)) > 0) {
        got[i] += r;
        if (!len) {
          char *head = memmem(buf, r, "\r\n\r\n", 4), *cl = strcasestr(buf, "content-length:");
          if (!head || !cl) { fprintf(stderr, "the first response's head is not in one read\n"); return 1; }
          len = (head + 4 - buf) + atol(cl + 15);
        }
        if (got[i] >= len) {
          got[i] -= len;
          done++;
          if (wrk) {
            interest(ep, EPOLL_CTL_MOD, s, EPOLLOUT, i);
          } else if (write(s, req, rl) != rl) {
            return 1;
          }
          break;
        }
      }
      if (r == 0) { fprintf(stderr, "the server closed a connection\n"); return 1; }
    }
  }
  printf("%.0f\n", done / (now() - t0));
  return 0;
}
