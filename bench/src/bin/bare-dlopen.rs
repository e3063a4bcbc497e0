//! The boot baseline: a minimal program that only `dlopen`s the libraries
//! named on its command line (with the flags the host's loader uses,
//! `RTLD_LAZY | RTLD_LOCAL`) and exits. No cordis code runs.

use std::ffi::CString;
use std::os::raw::{c_char, c_int, c_void};
use std::os::unix::ffi::OsStringExt;

extern "C" {
    fn dlopen(filename: *const c_char, flags: c_int) -> *mut c_void;
    fn dlerror() -> *const c_char;
}

const RTLD_LAZY: c_int = 0x1;
const RTLD_LOCAL: c_int = 0;

fn main() {
    for arg in std::env::args_os().skip(1) {
        let Ok(name) = CString::new(arg.into_vec()) else {
            eprintln!("bare-dlopen: a path with a NUL byte");
            std::process::exit(2);
        };
        // SAFETY: `name` is a valid C string; the handle is never used and the
        // library is never closed.
        let handle = unsafe { dlopen(name.as_ptr(), RTLD_LAZY | RTLD_LOCAL) };
        if handle.is_null() {
            // SAFETY: dlerror returns a C string describing the last failure.
            let why = unsafe { std::ffi::CStr::from_ptr(dlerror()) };
            eprintln!("bare-dlopen: {}", why.to_string_lossy());
            std::process::exit(1);
        }
    }
}
