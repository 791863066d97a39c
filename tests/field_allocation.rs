//! The field evaluation of the tiled `usa`/`sa` kernels allocates nothing (a counting allocator
//! around the system one; the first evaluation may warm up the thread pool). The count is taken
//! inside one thread pool's `install`, and the least of three rounds counts: rayon's own queues
//! may grow a block now and then under load, which a per-evaluation allocation would not hide.

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
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(2)
            .build()
            .unwrap();
        let count = pool.install(|| {
            field.eval(&x, &mut dx);
            (0..3)
                .map(|_| {
                    let before = ALLOCATIONS.load(Ordering::Relaxed);
                    for _ in 0..3 {
                        field.eval(&x, &mut dx);
                    }
                    ALLOCATIONS.load(Ordering::Relaxed) - before
                })
                .min()
                .unwrap_or(0)
        });
        assert_eq!(
            count, 0,
            "{kernel:?} symmetric {symmetric}: {count} allocations"
        );
        assert!(dx.iter().all(|v| v.is_finite()));
    }
}
