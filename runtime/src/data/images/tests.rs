//! Tests of `images`: real PNG files written to a temporary folder.

use super::*;
use crate::data::Len;
use image::{GrayImage, Luma, Rgb, RgbImage};

/// A fresh folder under the system's temporary directory.
fn scratch() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("dryml-images-{}", crate::objects::uuid_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// `root/<class>/<i>.png`: grey images of `w`×`h` whose pixel (x, y) is `class * 50 + i + x + y`.
fn gray_folder(root: &Path, classes: &[&str], per_class: usize, (w, h): (u32, u32)) {
    for (c, name) in classes.iter().enumerate() {
        std::fs::create_dir_all(root.join(name)).unwrap();
        for i in 0..per_class {
            let img = GrayImage::from_fn(w, h, |x, y| Luma([(c * 50 + i) as u8 + x as u8 + y as u8]));
            img.save(root.join(name).join(format!("{i}.png"))).unwrap();
        }
    }
}

#[test]
fn a_folder_of_class_folders_is_a_dataset_of_pixels_and_classes() {
    let root = scratch();
    gray_folder(&root, &["zero", "one", "two"], 4, (3, 2));
    std::fs::write(root.join("one").join("notes.txt"), "not an image").unwrap();
    std::fs::write(root.join(".hidden.png"), "hidden files are not listed").unwrap();
    let f = folder(&root, &ImageOptions::default()).unwrap();
    assert_eq!(f.classes, ["one", "two", "zero"], "by name");
    assert_eq!((f.size, f.shape(), f.data.len()), ((3, 2), [1, 2, 3], Len::Known(12)));
    let all = f.data.collect().unwrap();
    // "one" is class 0; its image 2 has pixel (x, y) = 50 + 2 + x + y, row by row.
    let e = &all[2];
    assert_eq!(e.y, 0);
    let want: Vec<f32> = [52u8, 53, 54, 53, 54, 55].iter().map(|&v| f32::from(v) / 255.0).collect();
    assert_eq!(e.x.to_vec(), want);
    // A batch reads its files straight into rows: the same values as element by element.
    let mixed = f.data.shuffle(12, 4);
    let batch = mixed.batch(5, false).unwrap().peek().unwrap().unwrap();
    let one_by_one = mixed.take(5).collect().unwrap();
    for (r, e) in one_by_one.iter().enumerate() {
        assert_eq!(batch.x.row(r).to_vec(), e.x.to_vec());
        assert_eq!(batch.y[r], e.y);
    }
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn colour_images_are_channels_first() {
    let root = scratch();
    std::fs::create_dir_all(root.join("a")).unwrap();
    RgbImage::from_fn(2, 1, |x, _| Rgb([10 + x as u8, 20 + x as u8, 30 + x as u8])).save(root.join("a/p.png")).unwrap();
    let f = folder(&root, &ImageOptions { channels: Channels::Rgb, size: None }).unwrap();
    assert_eq!(f.shape(), [3, 1, 2]);
    let x = f.data.peek().unwrap().unwrap().x;
    assert_eq!(x.mapv(|v| (v * 255.0).round() as u8).to_vec(), [10, 11, 20, 21, 30, 31]);
    // Read as grey, the same file is one channel.
    assert_eq!(folder(&root, &ImageOptions::default()).unwrap().data.peek().unwrap().unwrap().x.len(), 2);
    std::fs::remove_dir_all(&root).unwrap();
}

#[test]
fn a_bad_file_or_folder_is_named() {
    let root = scratch();
    gray_folder(&root, &["a", "b"], 3, (4, 4));
    // An image of another size, and a file that is not a PNG at all.
    GrayImage::new(5, 4).save(root.join("b/1.png")).unwrap();
    std::fs::write(root.join("b/2.png"), b"not a png").unwrap();
    let f = folder(&root, &ImageOptions::default()).unwrap();
    let size = root.join("b/1.png").display().to_string();
    let e = f.data.collect().unwrap_err().to_string();
    assert_eq!(e, format!("{size}: element 4: the image is 5×4 pixels; the folder's images are 4×4"));
    // The same error through a batch, and through the elements before it nothing fails.
    assert_eq!(f.data.batch(6, false).unwrap().collect().unwrap_err().to_string(), e);
    assert_eq!(f.data.take(4).collect().unwrap().len(), 4);
    let corrupt = f.data.skip(5).collect().unwrap_err().to_string();
    assert!(corrupt.starts_with(&format!("{}: element 5: ", root.join("b/2.png").display())), "{corrupt}");
    // A size asked for that no file has.
    let e = folder(&root, &ImageOptions { size: Some((8, 8)), ..Default::default() })
        .unwrap()
        .data
        .peek()
        .unwrap_err()
        .to_string();
    assert!(e.ends_with("element 0: the image is 4×4 pixels; the folder's images are 8×8"), "{e}");
    // Folders that hold no images.
    let empty = scratch();
    assert_eq!(
        folder(&empty, &ImageOptions::default()).unwrap_err().to_string(),
        format!("{}: no class folders: an image folder holds one folder of images per class", empty.display())
    );
    std::fs::create_dir_all(empty.join("c")).unwrap();
    assert!(folder(&empty, &ImageOptions::default())
        .unwrap_err()
        .to_string()
        .contains("no .png or .jpg files in its 1 class folders"));
    let missing = folder(root.join("nowhere"), &ImageOptions::default()).unwrap_err().to_string();
    assert!(missing.starts_with(&format!("{}: ", root.join("nowhere").display())), "{missing}");
    std::fs::remove_dir_all(&root).unwrap();
    std::fs::remove_dir_all(&empty).unwrap();
}
