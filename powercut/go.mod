module github.com/idemlog/idemlog/powercut

go 1.26.0

require (
	github.com/hanwen/go-fuse/v2 v2.12.1
	github.com/idemlog/idemlog v0.0.0
)

require golang.org/x/sys v0.50.0

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
)

replace github.com/idemlog/idemlog => ../
