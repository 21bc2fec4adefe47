/* The least a UDP sender and receiver can do on loopback, as the floor the tools are held
 * against (scripts/floor-udp.sh): a blocking send of LEN bytes in a loop, a blocking recv in a
 * loop, nothing else (no sequence numbers, no timestamps).
 *
 *   udp sink PORT                 after each burst (300 ms without a datagram) prints the
 *                                 datagrams/s it received from the burst's first to its last
 *   udp source PORT SECONDS LEN   sends for SECONDS
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
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
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  char buf[65536];
  memset(buf, 0x5a, sizeof buf);
  if (!strcmp(argv[1], "sink")) {
    if (bind(s, (void *)&a, sizeof a)) { perror("bind"); return 1; }
    struct timeval tv = {.tv_usec = 300000};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    long long n = 0;
    double first = 0, last = 0;
    for (;;) {
      if (recv(s, buf, sizeof buf, 0) >= 0) {
        last = now();
        if (n++ == 0) first = last;
      } else if (n > 1) {
        printf("%.0f\n", (n - 1) / (last - first));
        fflush(stdout);
        n = 0;
      }
    }
  }
  if (argc < 5) return 2;
  size_t len = (size_t)atol(argv[4]);
  if (len > sizeof buf || connect(s, (void *)&a, sizeof a)) return 1;
  double end = now() + atof(argv[3]);
  while (now() < end) send(s, buf, len, 0);
  return 0;
}
