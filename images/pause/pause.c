/* The pod sandbox's process (containerd's sandbox_image): holds the pod's namespaces, reaps the zombies of a
 * shared PID namespace, and exits 0 on SIGTERM or SIGINT. Built static, the image holds nothing else. */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int signum) { (void)signum; _exit(0); }

static void reap(int signum) {
  (void)signum;
  while (waitpid(-1, NULL, WNOHANG) > 0) {}
}

int main(void) {
  struct sigaction on_stop = {.sa_handler = stop}, on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGTERM, &on_stop, NULL) || sigaction(SIGINT, &on_stop, NULL) || sigaction(SIGCHLD, &on_child, NULL))
    return 1;
  for (;;) pause();
}
