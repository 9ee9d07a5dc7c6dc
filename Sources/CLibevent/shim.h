// sys/types.h must come first: event-config.h defines _GNU_SOURCE, and letting it run before
// glibc's features.h gives fd_set a different member name here than in every other module.
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/eventfd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <event2/event.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/listener.h>
#include <event2/dns.h>
#include <event2/util.h>

// Composite macros do not import into Swift.
static const int larder_DNS_OPTIONS_ALL = DNS_OPTIONS_ALL;

// splice(2) and pipe2(2) for tunnels. glibc declares them only when _GNU_SOURCE is set before
// features.h, which the include order above rules out; these are glibc's own prototypes.
extern __ssize_t splice(int __fdin, __off64_t *__offin, int __fdout, __off64_t *__offout,
                        size_t __len, unsigned int __flags);
extern int pipe2(int __pipedes[2], int __flags);
static const unsigned int larder_SPLICE_F_MOVE = 1;
static const unsigned int larder_SPLICE_F_NONBLOCK = 2;
static const int larder_F_SETPIPE_SZ = 1031;
static const int larder_F_GETPIPE_SZ = 1032;
