//! The field evaluation of the tiled `usa`/`sa` kernels allocates nothing (a counting allocator
//! around the system one; the first evaluation may warm up the thread pool).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use nalgebra::DMatrix;
use tokdyn::model::{Attention, Head, Kernel, SphereField};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is passed to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        System.realloc(ptr, layout, size)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn tiled_field_evaluations_allocate_nothing() {
    let (n, d) = (301, 12);
    for (kernel, symmetric) in [
        (Kernel::Usa, false),
        (Kernel::Sa, false),
        (Kernel::Usa, true),
        (Kernel::Sa, true),
    ] {
        let a = DMatrix::from_fn(d, d, |i, j| {
            let (i, j) = if symmetric {
                (i.min(j), i.max(j))
            } else {
                (i, j)
            };
            ((i * 7 + j * 3) as f64 * 0.37).sin() * 0.5
        });
        let v = DMatrix::from_fn(d, d, |i, j| ((i + 2 * j) as f64 * 0.21).cos());
        let field = SphereField::new(Attention::new(kernel, 1.0, vec![Head { a, v }]), n);
        let x: Vec<f64> = (0..n * d).map(|i| (i as f64 * 0.618).sin()).collect();
        let mut dx = vec![0.0; n * d];
        field.eval(&x, &mut dx);
        let before = ALLOCATIONS.load(Ordering::Relaxed);
        for _ in 0..3 {
            field.eval(&x, &mut dx);
        }
        let count = ALLOCATIONS.load(Ordering::Relaxed) - before;
        assert_eq!(
            count, 0,
            "{kernel:?} symmetric {symmetric}: {count} allocations"
        );
        assert!(dx.iter().all(|v| v.is_finite()));
    }
}
