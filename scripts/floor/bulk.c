/* The least a TCP bulk sender and receiver can do on loopback, as the floor the tools are held
 * against (scripts/floor-bulk.sh): a receiver reading READ bytes per call in a loop (default
 * 1 MiB), a sender sending BLOCK bytes per call for SECONDS (non-blocking with poll, or
 * blocking), nothing else.
 *
 *   bulk sink PORT [READ]
 *   bulk source PORT SECONDS BLOCK [nonblock]     prints "GBIT_PER_S"
 *
 * CONGESTION in the environment names the congestion control of both ends' sockets (TCP_CONGESTION).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static void congestion(int fd) {
  const char *cc = getenv("CONGESTION");
  if (cc && *cc && setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, strlen(cc))) perror("TCP_CONGESTION");
}

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (!strcmp(argv[1], "sink")) {
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    congestion(l);
    if (bind(l, (void *)&a, sizeof a) || listen(l, 4)) { perror("bind"); return 1; }
    size_t rs = argc > 3 ? (size_t)atol(argv[3]) : 1 << 20;
    char *buf = malloc(rs);
    for (;;) {
      int c = accept(l, 0, 0);
      while (read(c, buf, rs) > 0) {}
      close(c);
    }
  }
  if (argc < 5) return 2;
  double secs = atof(argv[3]);
  size_t blk = (size_t)atol(argv[4]);
  int s = socket(AF_INET, SOCK_STREAM, 0);
  congestion(s);
  if (connect(s, (void *)&a, sizeof a)) { perror("connect"); return 1; }
  if (argc > 5) fcntl(s, F_SETFL, O_NONBLOCK);
  char *buf = malloc(blk);
  memset(buf, 0x5a, blk);
  double t0 = now(), end = t0 + secs;
  long long total = 0;
  while (now() < end) {
    ssize_t n = send(s, buf, blk, MSG_NOSIGNAL);
    if (n > 0) {
      total += n;
    } else if (n < 0 && errno == EAGAIN) {
      struct pollfd p = {s, POLLOUT, 0};
      poll(&p, 1, 50);
    } else {
      break;
    }
  }
  double t = now() - t0;
  printf("%.3f\n", total * 8 / t / 1e9);
  return 0;
}
