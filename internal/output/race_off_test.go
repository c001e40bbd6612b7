//go:build !race

package output

const raceBuild = false
