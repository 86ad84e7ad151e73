//! Tests of `numpy`: real files, written by ndarray-npy as numpy writes them.

use super::*;
use crate::data::ndarray::{arr1, Array2, Array3};
use ndarray_npy::{NpzWriter, WriteNpyExt};

fn dir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("dryml-numpy-{}", crate::objects::uuid_v4()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A `.npy` file of big-endian `f32`s of `shape` (numpy's text, `(2, 2)`), as numpy writes it.
fn big_endian_f4(shape: &str, values: &[f32]) -> Vec<u8> {
    let header = format!("{{'descr': '>f4', 'fortran_order': False, 'shape': {shape}, }}");
    let pad = 64 - (10 + header.len() + 1) % 64;
    let mut big = b"\x93NUMPY\x01\x00".to_vec();
    big.extend(((header.len() + pad + 1) as u16).to_le_bytes());
    big.extend(header.bytes().chain(std::iter::repeat_n(b' ', pad)).chain([b'\n']));
    for v in values {
        big.extend(v.to_be_bytes());
    }
    big
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
    std::fs::write(d.join("big.npy"), big_endian_f4("(2, 2)", &[1.5, 2.0, -3.0, 4.25])).unwrap();
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

#[test]
fn an_npy_read_where_it_lies_gives_what_reading_it_whole_gives() {
    let d = dir();
    let create = |name: &str| std::fs::File::create(d.join(name)).unwrap();
    Array3::<u8>::from_shape_fn((37, 3, 2), |(i, r, c)| (i * 6 + r * 2 + c) as u8).write_npy(create("u8.npy")).unwrap();
    Array2::<f64>::from_shape_fn((37, 5), |(i, j)| i as f64 / 7.0 - j as f64).write_npy(create("f64.npy")).unwrap();
    Array2::<i64>::from_shape_fn((37, 2), |(i, j)| i as i64 * 1000 - j as i64).write_npy(create("i64.npy")).unwrap();
    Array2::<i32>::from_shape_fn((37, 2), |(i, j)| -(i as i32) + j as i32).write_npy(create("i32.npy")).unwrap();
    Array2::<f32>::from_shape_fn((37, 4), |(i, j)| i as f32 * 0.25 + j as f32).write_npy(create("f32.npy")).unwrap();
    let values: Vec<f32> = (0..37 * 3).map(|v| v as f32 * 1.5).collect();
    std::fs::write(d.join("big.npy"), big_endian_f4("(37, 3)", &values)).unwrap();
    for name in ["u8.npy", "f64.npy", "i64.npy", "i32.npy", "f32.npy", "big.npy"] {
        let (whole, lies) = (rows(d.join(name)).unwrap(), rows_on_disk(d.join(name)).unwrap());
        assert_eq!(lies.count().unwrap(), 37, "{name}");
        assert_eq!(lies.collect().unwrap(), whole.collect().unwrap(), "{name}");
        // Shuffled batches read their rows apart; a pass in order reads runs of them.
        let passes: [fn(&Dataset<Array1<f32>>) -> Dataset<Array1<f32>>; 2] = [|d| d.shuffle(64, 3), |d| d.skip(5)];
        for data in passes {
            let batches = |d: &Dataset<Array1<f32>>| data(d).batch(8, false).unwrap().collect().unwrap();
            assert_eq!(batches(&lies), batches(&whole), "{name}");
        }
    }
    // Bad files: named, with what is wrong, when the dataset is made or when a pass reaches it.
    let bytes = std::fs::read(d.join("f32.npy")).unwrap();
    std::fs::write(d.join("cut.npy"), &bytes[..bytes.len() - 3]).unwrap();
    let e = rows_on_disk(d.join("cut.npy")).unwrap_err().to_string();
    assert!(
        e.contains(
            "cut.npy: the file is cut: its header promises 592 bytes of values (shape [37, 4]) and it holds 589"
        ),
        "{e}"
    );
    Array2::<f32>::zeros((3, 2)).reversed_axes().write_npy(create("fortran.npy")).unwrap();
    let e = rows_on_disk(d.join("fortran.npy")).unwrap_err().to_string();
    assert!(e.contains("fortran.npy: its values are in Fortran order"), "{e}");
    assert_eq!(rows(d.join("fortran.npy")).unwrap().count().unwrap(), 2, "read whole, any order");
    Array2::<u16>::zeros((2, 2)).write_npy(create("u16.npy")).unwrap();
    let e = rows_on_disk(d.join("u16.npy")).unwrap_err().to_string();
    assert!(e.contains("u16.npy: its dtype `<u2` is none of float32"), "{e}");
    assert_eq!(rows(d.join("u16.npy")).unwrap_err().to_string(), e, "read whole, the same words");
    let mut huge = b"\x93NUMPY\x02\x00".to_vec();
    huge.extend(u32::MAX.to_le_bytes());
    std::fs::write(d.join("huge.npy"), huge).unwrap();
    let e = rows_on_disk(d.join("huge.npy")).unwrap_err().to_string();
    assert!(e.ends_with("huge.npy: its header claims 4294967295 bytes: not a .npy file dryml can read"), "{e}");
    std::fs::write(d.join("text.npy"), b"not numpy at all").unwrap();
    let e = rows_on_disk(d.join("text.npy")).unwrap_err().to_string();
    assert!(e.ends_with("text.npy: not a .npy file: it does not start with numpy's header"), "{e}");
    // A file that shrinks under a dataset: the pass that reaches the lost rows says which.
    let lies = rows_on_disk(d.join("f32.npy")).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(d.join("f32.npy"))
        .unwrap()
        .set_len(bytes.len() as u64 - 16 * 20)
        .unwrap();
    let e = lies.collect().unwrap_err().to_string();
    assert!(e.contains("f32.npy: element 17: failed to fill whole buffer"), "{e}");
    std::fs::remove_dir_all(&d).unwrap();
}
