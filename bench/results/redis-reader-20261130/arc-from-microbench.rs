use std::sync::Arc; use std::time::Instant; use std::hint::black_box;
fn main(){ for &n in &[1024usize,16384,65536] { let key=vec![7u8;24]; let val=vec![9u8;n]; let iters= 2_000_000_000/ (n*20);
 for round in 0..3 {
 let t=Instant::now(); for _ in 0..iters { let a:Arc<[u8]>=black_box(&key).iter().chain(black_box(&val)).copied().collect(); black_box(a);} let c=t.elapsed().as_nanos() as f64/iters as f64;
 let t=Instant::now(); for _ in 0..iters { let a:Arc<[u8]>=Arc::from([black_box(&key[..]),black_box(&val[..])].concat()); black_box(a);} let d=t.elapsed().as_nanos() as f64/iters as f64;
 println!("value {n} round {round}: chained collect {c:.0} ns, concat+Arc::from {d:.0} ns ({:.2}x)", c/d);}}}
