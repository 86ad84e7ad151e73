//! Tests of `numpy`: real files, written by ndarray-npy as numpy writes them.

use super::*;
use crate::data::ndarray::{arr1, Array2, Array3};
use ndarray_npy::{NpzWriter, WriteNpyExt};

fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("dryml-numpy-{}", crate::objects::uuid_v4()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn an_npy_of_images_gives_a_row_of_pixels_per_image_whatever_its_dtype() {
    let d = dir();
    let images = Array3::<u8>::from_shape_fn((3, 2, 2), |(i, r, c)| (i * 4 + r * 2 + c) as u8);
    images.write_npy(std::fs::File::create(d.join("u8.npy")).unwrap()).unwrap();
    let got = rows(d.join("u8.npy")).unwrap().collect().unwrap();
    assert_eq!(got, vec![arr1(&[0.0f32, 1.0, 2.0, 3.0]), arr1(&[4.0, 5.0, 6.0, 7.0]), arr1(&[8.0, 9.0, 10.0, 11.0])]);
    Array2::<f64>::from_elem((2, 3), 0.5).write_npy(std::fs::File::create(d.join("f64.npy")).unwrap()).unwrap();
    assert_eq!(rows(d.join("f64.npy")).unwrap().collect().unwrap(), vec![arr1(&[0.5f32; 3]); 2]);
    // Big-endian, as numpy writes `astype('>f4')`: the header's dtype says so.
    let header = "{'descr': '>f4', 'fortran_order': False, 'shape': (2, 2), }";
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut big = b"\x93NUMPY\x01\x00".to_vec();
    big.extend(((header.len() + pad + 1) as u16).to_le_bytes());
    big.extend(header.bytes().chain(std::iter::repeat_n(b' ', pad)).chain([b'\n']));
    for v in [1.5f32, 2.0, -3.0, 4.25] {
        big.extend(v.to_be_bytes());
    }
    std::fs::write(d.join("big.npy"), big).unwrap();
    assert_eq!(rows(d.join("big.npy")).unwrap().collect().unwrap(), vec![arr1(&[1.5f32, 2.0]), arr1(&[-3.0, 4.25])]);
    std::fs::remove_dir_all(&d).unwrap();
}

#[test]
fn an_npz_gives_features_and_classes_and_bad_archives_are_named() {
    let d = dir();
    let write = |name: &str, x: Array2<f32>, y: Array1<i64>| {
        let mut npz = NpzWriter::new_compressed(std::fs::File::create(d.join(name)).unwrap());
        npz.add_array("x", &x).unwrap();
        npz.add_array("y", &y).unwrap();
        npz.finish().unwrap();
    };
    write("ok.npz", Array2::from_shape_fn((3, 2), |(i, j)| (i * 2 + j) as f32), arr1(&[2, 0, 1]));
    let got = xy(d.join("ok.npz"), "x", "y").unwrap().collect().unwrap();
    assert_eq!(got.iter().map(|e| e.y).collect::<Vec<_>>(), vec![2, 0, 1]);
    assert_eq!(got[1].x, arr1(&[2.0f32, 3.0]));
    let file = d.join("ok.npz").display().to_string();
    let e = xy(d.join("ok.npz"), "pixels", "y").unwrap_err().to_string();
    assert!(e.contains(&file) && e.contains("has no array `pixels` (it holds x, y)"), "{e}");
    write("short.npz", Array2::zeros((3, 2)), arr1(&[0, 1]));
    let e = xy(d.join("short.npz"), "x", "y").unwrap_err().to_string();
    assert!(e.contains("array `x` has 3 rows and `y` 2 classes"), "{e}");
    write("negative.npz", Array2::zeros((2, 2)), arr1(&[0, -1]));
    let e = xy(d.join("negative.npz"), "x", "y").unwrap_err().to_string();
    assert!(e.contains("array `y`, element 1: -1 is not a class"), "{e}");
    // A file cut short, and one that is no archive: the file and the trouble, not a panic.
    let whole = std::fs::read(d.join("ok.npz")).unwrap();
    std::fs::write(d.join("cut.npz"), &whole[..whole.len() / 2]).unwrap();
    assert!(xy(d.join("cut.npz"), "x", "y").unwrap_err().to_string().contains("cut.npz"));
    Array2::<f32>::zeros((2, 2)).write_npy(std::fs::File::create(d.join("plain.npy")).unwrap()).unwrap();
    let bytes = std::fs::read(d.join("plain.npy")).unwrap();
    std::fs::write(d.join("cut.npy"), &bytes[..bytes.len() - 3]).unwrap();
    let e = rows(d.join("cut.npy")).unwrap_err().to_string();
    assert!(e.contains("cut.npy"), "{e}");
    std::fs::write(d.join("text.npy"), b"not numpy").unwrap();
    assert!(rows(d.join("text.npy")).unwrap_err().to_string().contains("text.npy"));
    std::fs::remove_dir_all(&d).unwrap();
}
