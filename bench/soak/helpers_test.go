package soak

// Beyond returns the calls held for a day after the last one: generated,
// never delivered.
func (g *Generator) Beyond() int64 { return g.beyond }
