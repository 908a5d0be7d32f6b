module orchard.dev/plugins/pdns-tsig-go

go 1.26

require (
	github.com/oapi-codegen/runtime v1.9.0
	orchard.dev/sdk v0.0.0
)

require (
	github.com/apapsch/go-jsonmerge/v2 v2.0.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
)
