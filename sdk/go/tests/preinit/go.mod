module orchard.dev/tests/preinit

go 1.26

require orchard.dev/sdk v0.0.0
