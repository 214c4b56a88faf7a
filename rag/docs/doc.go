// Package docs turns a folder of Markdown, HTML and text documents into a
// rag.Corpus whose entries are chunks that follow the documents'
// structure and know their source.
//
// Markdown is parsed as CommonMark by goldmark and HTML by the
// golang.org/x/net/html tokenizer (text only); text files are split into
// paragraphs at blank lines. A chunk holds blocks of one section (it never
// crosses a heading), packed up to Options.ChunkTokens tokens of
// BytesPerToken bytes, consecutive chunks of a section overlapping by up
// to Options.ChunkOverlap tokens of whole sentences; a block longer than
// the limit is cut at sentence ends, then at whitespace.
//
// A chunk's id is "<path>#<heading slugs>-<ordinal>" ("<path>#<ordinal>"
// before the first heading): unique, free of brackets, quotes and
// whitespace (it is cited as [id]) and unchanged while its section is.
// Its metadata: source (slash path relative to the folder), section (the
// heading path as a label), headings (the heading titles, outermost
// first) and span ([start, end) byte offsets in the file; for Markdown
// and text the chunk's text is exactly those bytes). docs/rag.md has the
// full rules. Nothing here writes or touches the network.
package docs
