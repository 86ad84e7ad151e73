//! The hash JupyterLab's debugger names a cell's source file by (32-bit MurmurHash2 of the
//! cell's UTF-8 bytes, as `packages/debugger/src/hash.ts` computes it), so the kernel writes
//! `dumpCell`'s file at the very path the front end sets breakpoints on.

const M: u32 = 0x5bd1_e995;

/// MurmurHash2 (Appleby's 32-bit version) of `data` with `seed`.
pub fn murmur2(data: &[u8], seed: u32) -> u32 {
    let mut h = seed ^ data.len() as u32;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        let mut k = u32::from_le_bytes([w[0], w[1], w[2], w[3]]).wrapping_mul(M);
        k ^= k >> 24;
        h = h.wrapping_mul(M) ^ k.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, &b) in tail.iter().enumerate() {
            h ^= u32::from(b) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

#[cfg(test)]
mod tests {
    use super::murmur2;

    /// Computed with JupyterLab's `hash.ts` (run in node) and ipykernel's `murmur2_x86`, which
    /// agree on every row; the seed is ipykernel's, 0xC70F6907, then JupyterLab's default, 0.
    #[test]
    fn matches_jupyterlab_on_its_hash_of_cells() {
        let rows: [(&str, u32, u32); 10] = [
            ("", 3990065800, 0),
            ("a", 2167009006, 2456313694),
            ("ab", 2805137849, 446775395),
            ("abc", 3350977461, 324500635),
            ("abcd", 804720481, 646393889),
            ("i = 0", 3033251095, 1245579502),
            ("print('hello')\n", 4288063316, 1612567987),
            ("x <- 1 + 1\nprint(x)", 72514092, 1754757876),
            ("héllo ∑ 😀", 4080028636, 1902938866),
            ("let x = 42;\nprintln!(\"{}\", x);", 2381545989, 2747434103),
        ];
        for (code, ipykernel_seed, zero_seed) in rows {
            assert_eq!(murmur2(code.as_bytes(), 0xC70F_6907), ipykernel_seed, "{code:?}");
            assert_eq!(murmur2(code.as_bytes(), 0), zero_seed, "{code:?}");
        }
    }
}
