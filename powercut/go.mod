module github.com/idemlog/idemlog/powercut

go 1.26.0

require github.com/hanwen/go-fuse/v2 v2.12.1

require golang.org/x/sys v0.50.0

replace github.com/idemlog/idemlog => ../
