/* Minimal pod sandbox process for the real-containerd test: sleeps until SIGTERM or SIGINT. */
#include <signal.h>
#include <unistd.h>
static void quit(int sig) {
  (void)sig;
  _exit(0);
}
int main(void) {
  signal(SIGTERM, quit);
  signal(SIGINT, quit);
  for (;;) pause();
}
