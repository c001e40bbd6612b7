package table

// Builtin returns every built-in table, generated from the reference .meta files.
func Builtin() []*Table { return builtin }

// Lookup finds a built-in table by table_name.
func Lookup(name string) *Table {
	for _, t := range builtin {
		if t.Name == name {
			return t
		}
	}
	return nil
}
