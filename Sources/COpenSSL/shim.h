// OpenSSL 3 headers, plus functions for what OpenSSL exposes only as macros.
#ifndef STOCKROOM_COPENSSL_SHIM_H
#define STOCKROOM_COPENSSL_SHIM_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/cms.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/objects.h>
#include <openssl/ocsp.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

static inline STACK_OF(X509) *stockroom_sk_X509_new_null(void) {
    return sk_X509_new_null();
}

static inline int stockroom_sk_X509_push(STACK_OF(X509) *stack, X509 *certificate) {
    return sk_X509_push(stack, certificate);
}

/// Frees the stack and every certificate on it.
static inline void stockroom_sk_X509_pop_free(STACK_OF(X509) *stack) {
    sk_X509_pop_free(stack, X509_free);
}

static inline int stockroom_sk_X509_num(const STACK_OF(X509) *stack) {
    return sk_X509_num(stack);
}

static inline X509 *stockroom_sk_X509_value(const STACK_OF(X509) *stack, int index) {
    return sk_X509_value(stack, index);
}

/// Frees the stack only; the certificates on it belong to their owners.
static inline void stockroom_sk_X509_free(STACK_OF(X509) *stack) {
    sk_X509_free(stack);
}

/// A new P-256 key pair (EVP_EC_gen is a macro over a variadic function).
static inline EVP_PKEY *stockroom_EC_P256_generate(void) {
    return EVP_EC_gen("P-256");
}

static inline long stockroom_BIO_get_mem_data(BIO *bio, char **data) {
    return BIO_get_mem_data(bio, data);
}

static inline void stockroom_OPENSSL_free(void *pointer) {
    OPENSSL_free(pointer);
}

/// How many strings a `STACK_OF(OPENSSL_STRING)` holds (`X509_get1_ocsp`'s answer).
static inline int stockroom_sk_OPENSSL_STRING_num(const STACK_OF(OPENSSL_STRING) *stack) {
    return sk_OPENSSL_STRING_num(stack);
}

static inline const char *stockroom_sk_OPENSSL_STRING_value(const STACK_OF(OPENSSL_STRING) *stack, int index) {
    return sk_OPENSSL_STRING_value(stack, index);
}

#endif
