#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/bn.h>

// Function-like macros do not import into Swift; these inline wrappers stand in for them.
static inline long larder_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int v) { return SSL_CTX_set_min_proto_version(ctx, v); }
static inline long larder_SSL_CTX_set_max_proto_version(SSL_CTX *ctx, int v) { return SSL_CTX_set_max_proto_version(ctx, v); }
static inline long larder_SSL_set_tlsext_host_name(SSL *ssl, const char *name) { return SSL_set_tlsext_host_name(ssl, name); }
static inline long larder_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline long larder_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_session_cache_mode(ctx, mode); }
static const uint64_t larder_SSL_OP_NO_COMPRESSION = SSL_OP_NO_COMPRESSION;
static const uint64_t larder_SSL_OP_NO_RENEGOTIATION = SSL_OP_NO_RENEGOTIATION;
static inline long larder_BIO_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }
static inline void larder_OPENSSL_free(void *p) { OPENSSL_free(p); }
static const int larder_MBSTRING_ASC = MBSTRING_ASC;
