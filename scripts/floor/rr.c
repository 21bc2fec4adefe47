/* The least a 1-byte TCP request/response and a connect/request/response/close can cost on
 * loopback, as the floor the tools are held against (scripts/floor-rr.sh): blocking calls in
 * a loop, one clock read per transaction, nothing else.
 *
 *   rr serve PORT [crr]       answer each 1-byte request with 1 byte, one connection at a time;
 *                             crr: close after the first answer (the server closes first, as
 *                             netperf's TCP_CRR server does)
 *   rr rr PORT SECONDS        one connection, request/response in a loop; prints "PER_S"
 *   rr crr PORT SECONDS       a new connection per request/response, closed after the server's
 *                             end of file; prints "PER_S"
 */
#include <arpa/inet.h>
#include <netinet/in.h>
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

int main(int argc, char **argv) {
  if (argc < 3) return 2;
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(atoi(argv[2]))};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  char b = 1;
  if (!strcmp(argv[1], "serve")) {
    int once = argc > 3 && !strcmp(argv[3], "crr");
    int l = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(l, (void *)&a, sizeof a) || listen(l, 128)) { perror("bind"); return 1; }
    for (;;) {
      int c = accept(l, 0, 0);
      if (c < 0) continue;
      while (recv(c, &b, 1, 0) == 1 && send(c, &b, 1, MSG_NOSIGNAL) == 1 && !once) {}
      close(c);
    }
  }
  if (argc < 4) return 2;
  double secs = atof(argv[3]), t0 = now(), end = t0 + secs;
  long long n = 0;
  if (!strcmp(argv[1], "rr")) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    if (connect(s, (void *)&a, sizeof a)) { perror("connect"); return 1; }
    while (now() < end && send(s, &b, 1, 0) == 1 && recv(s, &b, 1, 0) == 1) n++;
    close(s);
  } else {
    while (now() < end) {
      int s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, (void *)&a, sizeof a)) { perror("connect"); return 1; }
      if (send(s, &b, 1, 0) != 1 || recv(s, &b, 1, 0) != 1) return 1;
      while (recv(s, &b, 1, 0) > 0) {}
      close(s);
      n++;
    }
  }
  printf("%.1f\n", n / (now() - t0));
  return 0;
}
