//! The binary's allocator: the system's, with large blocks backed by huge pages where the kernel
//! offers them only on request.
//!
//! A tool's result arrives from the plugin as one string, copied out of its linear memory into a
//! fresh allocation: 22 MB for a `Read` of a 20 MiB file. Fresh memory costs a page fault and a
//! zeroed page per 4 KiB touched, and on a virtual machine a fault is a trap to the hypervisor
//! too. Linux's default transparent-huge-page mode (`madvise`) backs a range with 2 MiB pages only
//! where the program asks, so blocks of [`THRESHOLD`] or more are advised: one fault per 2 MiB.
//! Smaller blocks are left alone, since a huge page could hold far more memory than they use.
//! glibc's own `glibc.malloc.hugetlb=1` tunable does the same, but only when set in the
//! environment before the process starts.

use std::alloc::{GlobalAlloc, Layout, System};

/// The smallest block that is advised.
pub const THRESHOLD: usize = 4 << 20;

/// The size of a huge page on the architectures rawko is built for.
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// [`System`], advising large blocks to use huge pages (see the module's documentation).
pub struct Allocator;

/// Ask for huge pages for the whole 2 MiB-aligned pages inside `len` bytes at `ptr`. The advice
/// changes no contents and no protections; where the kernel has no huge pages it is refused and
/// nothing changes.
#[cfg(target_os = "linux")]
fn advise(ptr: *mut u8, len: usize) {
    let start = (ptr as usize).next_multiple_of(HUGE_PAGE);
    let end = (ptr as usize).saturating_add(len) & !(HUGE_PAGE - 1);
    if end > start {
        // SAFETY: the range lies inside a block this allocator has just handed out; MADV_HUGEPAGE
        // only sets a flag on the mapping.
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

#[cfg(not(target_os = "linux"))]
fn advise(_ptr: *mut u8, _len: usize) {}

/// `ptr`, a block of `size` bytes just returned by `System` (or null), advised if it is large.
fn advised(ptr: *mut u8, size: usize) -> *mut u8 {
    if size >= THRESHOLD && !ptr.is_null() {
        advise(ptr, size);
    }
    ptr
}

// SAFETY: every call is passed to `System` unchanged; `advise` only adds a hint about memory the
// call returned.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract is System's.
        advised(unsafe { System.alloc(layout) }, layout.size())
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as above.
        advised(unsafe { System.alloc_zeroed(layout) }, layout.size())
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as above.
        advised(unsafe { System.realloc(ptr, layout, new_size) }, new_size)
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// The `VmFlags` of the mapping that holds `addr`, from `/proc/self/smaps`.
    fn vm_flags(addr: usize) -> String {
        let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((a, b)) = range.split_once('-')
                && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                inside = (a..b).contains(&addr);
            } else if inside && let Some(flags) = line.strip_prefix("VmFlags:") {
                return flags.trim().to_owned();
            }
        }
        panic!("no mapping holds {addr:#x}");
    }

    /// Whether the mapping holding `addr` is advised to use huge pages (`hg`).
    fn assert_advised(addr: usize, advised: bool) {
        let flags = vm_flags(addr);
        assert_eq!(flags.split(' ').any(|f| f == "hg"), advised, "{flags}");
    }

    fn huge_pages_on_request() -> bool {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .is_ok_and(|mode| mode.contains("[madvise]") || mode.contains("[always]"))
    }

    #[test]
    fn large_blocks_are_advised_and_small_ones_are_not() {
        if !huge_pages_on_request() {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        let large = Layout::from_size_align(THRESHOLD * 2, 8).unwrap();
        let ptr = unsafe { Allocator.alloc(large) };
        assert!(!ptr.is_null());
        // The middle of the block lies on a whole huge page.
        let middle = ptr as usize + THRESHOLD;
        assert_advised(middle, true);
        unsafe { ptr.write_bytes(7, large.size()) };
        assert_eq!(unsafe { *ptr.add(large.size() - 1) }, 7);

        // Allocated while the large block is live, so it cannot land inside it.
        let small = Layout::from_size_align(64 << 10, 8).unwrap();
        let little = unsafe { Allocator.alloc(small) };
        assert_advised(little as usize, false);
        unsafe { Allocator.dealloc(little, small) };
        unsafe { Allocator.dealloc(ptr, large) };
    }

    #[test]
    fn a_block_grown_past_the_threshold_is_advised_and_keeps_its_contents() {
        if !huge_pages_on_request() {
            eprintln!("skipped: this kernel has no transparent huge pages");
            return;
        }
        let small = Layout::from_size_align(1 << 20, 8).unwrap();
        let ptr = unsafe { Allocator.alloc(small) };
        unsafe { ptr.write_bytes(3, small.size()) };
        let grown = unsafe { Allocator.realloc(ptr, small, THRESHOLD * 3) };
        assert!(!grown.is_null());
        assert_eq!(unsafe { *grown.add(small.size() - 1) }, 3);
        let middle = grown as usize + THRESHOLD;
        assert_advised(middle, true);
        unsafe { Allocator.dealloc(grown, Layout::from_size_align(THRESHOLD * 3, 8).unwrap()) };
    }
}
