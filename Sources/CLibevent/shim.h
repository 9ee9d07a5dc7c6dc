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
