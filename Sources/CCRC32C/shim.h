// CRC-32C (Castagnoli) with the x86-64 crc32 instruction (SSE 4.2), three blocks at a time.
// Other machines use the table in CRC32C.swift.
#ifndef STOCKROOM_CCRC32C_SHIM_H
#define STOCKROOM_CCRC32C_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/// The polynomial, bit-reflected (bit 31 is x^0).
#define STOCKROOM_CRC32C_POLYNOMIAL 0x82f63b78u

/// a * b modulo the polynomial, both bit-reflected; `a` must not be 0.
static inline uint32_t stockroom_crc32c_multiply(uint32_t a, uint32_t b) {
    uint32_t m = (uint32_t)1 << 31, p = 0;
    for (;;) {
        if (a & m) {
            p ^= b;
            if ((a & (m - 1)) == 0) break;
        }
        m >>= 1;
        b = (b & 1) ? (b >> 1) ^ STOCKROOM_CRC32C_POLYNOMIAL : b >> 1;
    }
    return p;
}

/// x^(8n) modulo the polynomial: multiplying a CRC register by it is feeding it n zero bytes.
static inline uint32_t stockroom_crc32c_zeros(uint64_t n) {
    uint32_t p = (uint32_t)1 << 31;      // x^0
    uint32_t power = (uint32_t)1 << 23;  // x^8
    while (n) {
        if (n & 1) p = stockroom_crc32c_multiply(power, p);
        power = stockroom_crc32c_multiply(power, power);
        n >>= 1;
    }
    return p;
}

#if defined(__x86_64__)
#include <cpuid.h>


static inline int stockroom_crc32c_hardware(void) {
    unsigned int a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return 0;
    return (c & bit_SSE4_2) != 0;
}

static inline uint64_t stockroom_crc32c_load(const unsigned char *p) {
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/// Continues `crc` (a finished CRC-32C, 0 to start) over `length` bytes. The bytes are read in
/// three interleaved blocks of `block` bytes (a multiple of 8), whose registers are joined with
/// `shift1` = stockroom_crc32c_zeros(block) and `shift2` = stockroom_crc32c_zeros(2 * block):
/// the instruction's latency is three cycles, its throughput one.
__attribute__((target("sse4.2")))
static inline uint32_t stockroom_crc32c_update(uint32_t crc, const void *bytes, size_t length, size_t block, uint32_t shift1, uint32_t shift2) {
    const unsigned char *next = (const unsigned char *)bytes;
    uint64_t c0 = (uint32_t)~crc;
    while (length && ((uintptr_t)next & 7)) {
        c0 = __builtin_ia32_crc32qi((uint32_t)c0, *next++);
        length--;
    }
    while (block && length >= 3 * block) {
        uint64_t c1 = 0, c2 = 0;
        const unsigned char *end = next + block;
        do {
            c0 = __builtin_ia32_crc32di(c0, stockroom_crc32c_load(next));
            c1 = __builtin_ia32_crc32di(c1, stockroom_crc32c_load(next + block));
            c2 = __builtin_ia32_crc32di(c2, stockroom_crc32c_load(next + 2 * block));
            next += 8;
        } while (next < end);
        c0 = stockroom_crc32c_multiply(shift2, (uint32_t)c0) ^ stockroom_crc32c_multiply(shift1, (uint32_t)c1) ^ (uint32_t)c2;
        next += 2 * block;
        length -= 3 * block;
    }
    while (length >= 8) {
        c0 = __builtin_ia32_crc32di(c0, stockroom_crc32c_load(next));
        next += 8;
        length -= 8;
    }
    while (length) {
        c0 = __builtin_ia32_crc32qi((uint32_t)c0, *next++);
        length--;
    }
    return ~(uint32_t)c0;
}
#else
static inline int stockroom_crc32c_hardware(void) { return 0; }
static inline uint32_t stockroom_crc32c_update(uint32_t crc, const void *bytes, size_t length, size_t block, uint32_t shift1, uint32_t shift2) {
    (void)bytes; (void)length; (void)block; (void)shift1; (void)shift2;
    return crc;
}
#endif

#endif
