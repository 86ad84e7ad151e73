//! The object-file reader on any bytes. Mode byte 1 gives the bytes a valid header (magic,
//! version, length, CRC-32) so the body's parser is reached past the checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, body)) = data.split_first() else { return };
    let file = if mode % 2 == 1 {
        let mut f = b"DRYMLOBJ".to_vec();
        f.extend_from_slice(&1u32.to_le_bytes());
        f.extend_from_slice(&(body.len() as u64).to_le_bytes());
        f.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
        f.extend_from_slice(body);
        f
    } else {
        body.to_vec()
    };
    let _ = dryml::__kernel::objects::read_definition(&file);
    let _ = dryml::__kernel::objects::from_bytes(&file, None);
});
