module github.com/idemlog/idemlog/bench/pidtable-compare

go 1.26.0

require github.com/idemlog/idemlog v0.0.0

require (
	github.com/klauspost/compress v1.20.4 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/puzpuzpuz/xsync/v4 v4.5.0
)

replace github.com/idemlog/idemlog => ../..
