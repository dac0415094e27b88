package atomicfile

import (
	"bytes"
	"errors"
	"fmt"

	"gopkg.in/yaml.v3"
)

// MaxAliasValues bounds what aliases may add to a YAML file: decoding
// reads an alias as a copy of its anchor's value, so a file of a few
// hundred bytes whose anchors alias each other nine times over ("billion
// laughs") decodes to a billion values. yaml.v3 stops such a file only
// after millions of them; a read of this package refuses, before decoding,
// a file whose aliases would add more values than this, and reads a file
// in time and memory that grow with its size alone.
const MaxAliasValues = 100_000

// errAliasBomb is the Err of a YAML file whose aliases add more than
// MaxAliasValues values.
var errAliasBomb = fmt.Errorf("its aliases expand to more than %d values (an alias bomb?); no config needs that many", MaxAliasValues)

// aliasBomb returns the line of the alias past which the first document of
// data expands to more than MaxAliasValues values through aliases, or 0
// when it does not (or does not parse: the decoder reports that). Parsing
// into nodes does not expand aliases, and each anchor's expanded size is
// counted once, so the check costs one parse and one walk.
func aliasBomb(data []byte) int {
	var root yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&root); err != nil {
		return 0
	}
	c := aliasCounter{size: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
	if _, err := c.count(&root); err != nil {
		return c.line
	}
	return 0
}

// aliasCounter counts the values a node tree decodes to, aliases expanded.
type aliasCounter struct {
	size  map[*yaml.Node]int  // expanded size of each anchored node counted
	open  map[*yaml.Node]bool // anchored nodes being counted: an alias to one is a cycle
	added int                 // values aliases added so far
	line  int                 // the alias that went past the limit
}

var errTooMany = errors.New("too many values")

// count returns the number of values n decodes to.
func (c *aliasCounter) count(n *yaml.Node) (int, error) {
	if n == nil {
		return 0, nil
	}
	if n.Kind == yaml.AliasNode {
		t := n.Alias
		if t == nil || c.open[t] {
			return 0, nil // undefined or cyclic: the decoder refuses it
		}
		size, ok := c.size[t]
		if !ok {
			var err error
			if size, err = c.count(t); err != nil {
				return 0, err
			}
		}
		c.added += size
		if c.added > MaxAliasValues {
			c.line = n.Line
			return 0, errTooMany
		}
		return size, nil
	}
	if n.Anchor != "" {
		if size, ok := c.size[n]; ok {
			return size, nil
		}
		c.open[n] = true
		defer delete(c.open, n)
	}
	total := 1
	for _, child := range n.Content {
		size, err := c.count(child)
		if err != nil {
			return 0, err
		}
		total += size
		if total > MaxAliasValues+len(n.Content) {
			total = MaxAliasValues + len(n.Content) // saturate: c.added trips first
		}
	}
	if n.Anchor != "" {
		c.size[n] = total
	}
	return total, nil
}
