module orchard.dev/sdk

go 1.26

require go.bytecodealliance.org/pkg v0.4.0

// The runtime package of wit-bindgen 0.63.0's Go bindings is not on the Go module proxy: the
// copy shipped in the wit-bindgen-go crate is vendored here (its go line lowered to 1.25).
// A replace in a dependency is ignored: sdk/go/build.sh builds through a go.work instead.
replace go.bytecodealliance.org/pkg => ./third_party/pkg
