// libcrypt (libxcrypt on Debian): bcrypt and SHA-crypt password hashes for proxy authentication.
#include <crypt.h>
