module orchard.dev/sdk

go 1.26

require (
	github.com/invopop/jsonschema v0.14.0
	go.bytecodealliance.org/pkg v0.4.0
)

require (
	github.com/bahlo/generic-list-go v0.2.0 // indirect
	github.com/buger/jsonparser v1.1.2 // indirect
	github.com/pb33f/ordered-map/v2 v2.3.1 // indirect
	go.yaml.in/yaml/v4 v4.0.0-rc.2 // indirect
)

// The runtime package of wit-bindgen 0.63.0's Go bindings is not on the Go module proxy: the
// copy shipped in the wit-bindgen-go crate is vendored here (its go line lowered to 1.25).
// A replace in a dependency is ignored: sdk/go/build.sh builds through a go.work instead.
replace go.bytecodealliance.org/pkg => ./third_party/pkg
