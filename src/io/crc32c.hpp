#pragma once
// CRC-32C (Castagnoli), the checksum of what a staged output wrote (a model directory's shard manifests
// record it): the SSE4.2 crc32 instruction where the CPU has it (several GB/s, so computing it while
// writing costs little), a table otherwise. Same value as crc32c libraries (iSCSI's polynomial, reflected, ~0 in and out).
#include <cstddef>
#include <cstdint>
#include <span>

namespace qpolicy {

/// The CRC-32C of `bytes` continued from `crc` (0 for a fresh one).
std::uint32_t crc32c(std::uint32_t crc, std::span<const std::byte> bytes);

}  // namespace qpolicy
