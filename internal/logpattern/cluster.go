package logpattern

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Pattern is one cluster of messages.
type Pattern struct {
	// ID is stable for the pattern's life: a hash of its first template,
	// 16 hex digits.
	ID string
	// Template is the masked text; it gains wildcards as the pattern
	// absorbs messages that differ from it in a word.
	Template string
	// Sample is the first message of the pattern (its first line, cut at
	// MaxSample).
	Sample string
	words  []string
}

// Similarity is the share of words a message must have equal to a
// pattern's, position by position, to join it (messages of different
// lengths never share a pattern).
const Similarity = 0.6

// cacheFactor bounds the template cache at this many entries per pattern
// of the cap.
const cacheFactor = 4

// Clusterer groups masked messages into at most Max patterns. It is not
// safe for concurrent use.
type Clusterer struct {
	max      int
	patterns []*Pattern
	byLen    map[int][]*Pattern
	// cache maps a template already seen to its pattern, so a repeated
	// message costs one map lookup; cleared when it reaches its bound.
	cache map[string]*Pattern
	m     masker
}

// NewClusterer returns a Clusterer holding at most max patterns (max >= 1).
func NewClusterer(max int) *Clusterer {
	if max < 1 {
		max = 1
	}
	return &Clusterer{max: max, byLen: map[int][]*Pattern{}, cache: map[string]*Pattern{}}
}

// Len is the number of patterns.
func (c *Clusterer) Len() int { return len(c.patterns) }

// Patterns returns the patterns, in creation order.
func (c *Clusterer) Patterns() []*Pattern { return c.patterns }

// Add files a message (its first line) under a pattern and returns it: an
// existing pattern whose template equals the message's, else the most
// similar one of the same length at or above Similarity (which then
// generalises: the words that differ become wildcards), else a new one.
// It returns nil when a new pattern is needed and the cap is reached: the
// caller counts the message as overflow.
func (c *Clusterer) Add(firstLine string) *Pattern {
	raw := c.m.key(firstLine)
	if p, ok := c.cache[string(raw)]; ok {
		return p
	}
	rawKey := string(raw)
	key := strings.ToValidUTF8(rawKey, "\uFFFD")
	words := []string{}
	if key != "" {
		words = strings.Split(key, " ")
	}
	var best *Pattern
	bestSim := -1
	for _, p := range c.byLen[len(words)] {
		eq := 0
		for i, w := range words {
			if p.words[i] == w {
				eq++
			}
		}
		if eq > bestSim {
			best, bestSim = p, eq
		}
	}
	if best != nil && bestSim > 0 && float64(bestSim) >= Similarity*float64(len(words)) {
		if bestSim < len(words) {
			for i, w := range words {
				if best.words[i] != w {
					best.words[i] = Wildcard
				}
			}
			best.Template = strings.Join(best.words, " ")
		}
		c.remember(rawKey, best)
		return best
	}
	if len(c.patterns) >= c.max {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte(key))
	id := strconv.FormatUint(h.Sum64(), 16)
	id = strings.Repeat("0", 16-len(id)) + id
	p := &Pattern{ID: id, Template: key, Sample: Sample(firstLine), words: words}
	c.patterns = append(c.patterns, p)
	c.byLen[len(words)] = append(c.byLen[len(words)], p)
	c.remember(rawKey, p)
	return p
}

func (c *Clusterer) remember(key string, p *Pattern) {
	if len(c.cache) >= cacheFactor*c.max {
		clear(c.cache)
	}
	c.cache[key] = p
}
