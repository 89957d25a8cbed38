module github.com/idemlog/idemlog

go 1.26.0

require (
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33
)

require golang.org/x/sys v0.50.0

require github.com/cespare/xxhash/v2 v2.3.0

require (
	github.com/HdrHistogram/hdrhistogram-go v1.4.0
	github.com/anishathalye/porcupine v1.3.1 // indirect
)
