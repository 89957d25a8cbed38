//go:build race

package pidtable

const raceBuild = true
