package table

//go:generate go run ./internal/metagen -o defs_gen.go meta
