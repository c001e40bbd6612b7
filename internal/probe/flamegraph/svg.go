package flamegraph

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"html"
	"io"
	"sort"
	"strings"
)

// The SVG flame graph is galago's own renderer (gala-gopher runs
// flamegraph.pl): one rect per frame of the merged stack tree, root at the
// bottom, width proportional to its count, children sorted by name as
// flamegraph.pl does; each frame carries a <title> (name, count, share)
// shown on hover, and clicking a frame zooms to it (a small script; the
// picture is complete without it).

const (
	svgWidth    = 1200.0
	svgPad      = 10.0
	frameHeight = 16.0
	fontSize    = 12.0
	charWidth   = 0.59 * fontSize // average glyph width of a sans font
	minWidth    = 0.1             // frames narrower than this (px) are omitted
)

type node struct {
	name     string
	count    uint64
	children map[string]*node
}

func (n *node) child(name string) *node {
	if n.children == nil {
		n.children = map[string]*node{}
	}
	c, ok := n.children[name]
	if !ok {
		c = &node{name: name}
		n.children[name] = c
	}
	return c
}

// buildTree merges the folded lines into one tree under an "all" root.
func buildTree(lines []foldedLine) *node {
	root := &node{name: "all"}
	for _, l := range lines {
		root.count += l.count
		n := root
		for _, f := range l.frames {
			n = n.child(f)
			n.count += l.count
		}
	}
	return root
}

func (n *node) depth() int {
	d := 0
	for _, c := range n.children {
		d = max(d, c.depth())
	}
	return d + 1
}

func (n *node) sortedChildren() []*node {
	out := make([]*node, 0, len(n.children))
	for _, c := range n.children {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// frameColor picks a stable colour per name: warm for user frames, orange
// for kernel ("_[k]") frames, blue-green for off-CPU graphs.
func frameColor(k kind, name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	v := h.Sum32()
	a, b := int(v%55), int((v>>8)%55)
	switch {
	case strings.HasSuffix(name, "_[k]"):
		return fmt.Sprintf("rgb(%d,%d,%d)", 200+a, 110+b, 0)
	case k == offCPU:
		return fmt.Sprintf("rgb(%d,%d,%d)", 0, 100+b, 190+a)
	case k.isMem():
		return fmt.Sprintf("rgb(%d,%d,%d)", 0, 170+a, 50+b) // flamegraph.pl --colors=mem
	default:
		return fmt.Sprintf("rgb(%d,%d,%d)", 200+a, 80+b, 40)
	}
}

// writeSVG renders lines as a flame graph.
func writeSVG(w io.Writer, k kind, title string, lines []foldedLine) error {
	root := buildTree(lines)
	depth := root.depth()
	height := float64(depth)*frameHeight + 3*frameHeight + 2*svgPad
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, `<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="%.0f" height="%.0f" viewBox="0 0 %.0f %.0f" xmlns="http://www.w3.org/2000/svg">
<style>text{font-family:Verdana,sans-serif;font-size:%.0fpx;fill:#000}.f:hover rect{stroke:#000;stroke-width:0.5}.f{cursor:pointer}</style>
<rect x="0" y="0" width="100%%" height="100%%" fill="#f8f8f8"/>
<text x="%.0f" y="%.0f" text-anchor="middle" style="font-size:17px">%s</text>
<g id="frames">
`, svgWidth, height, svgWidth, height, fontSize, svgWidth/2, svgPad+frameHeight, html.EscapeString(title))
	if root.count > 0 {
		scale := (svgWidth - 2*svgPad) / float64(root.count)
		base := height - svgPad - frameHeight // y of depth 0
		var draw func(n *node, x float64, d int)
		draw = func(n *node, x float64, d int) {
			wd := float64(n.count) * scale
			if wd < minWidth {
				return
			}
			y := base - float64(d)*frameHeight
			pct := 100 * float64(n.count) / float64(root.count)
			name := html.EscapeString(n.name)
			fmt.Fprintf(bw, `<g class="f"><title>%s (%d %s, %.2f%%)</title><rect x="%.2f" y="%.1f" width="%.2f" height="%.1f" fill="%s" rx="2"/>`,
				name, n.count, k.unit(), pct, x, y, wd, frameHeight-1, frameColor(k, n.name))
			if label := fitText(n.name, wd); label != "" {
				fmt.Fprintf(bw, `<text x="%.2f" y="%.1f">%s</text>`, x+3, y+frameHeight-4, html.EscapeString(label))
			}
			fmt.Fprint(bw, "</g>\n")
			cx := x
			for _, c := range n.sortedChildren() {
				draw(c, cx, d+1)
				cx += float64(c.count) * scale
			}
		}
		draw(root, svgPad, 0)
	}
	fmt.Fprint(bw, "</g>\n")
	fmt.Fprint(bw, zoomScript)
	fmt.Fprint(bw, "</svg>\n")
	return bw.Flush()
}

// fitText is name cut to fit width px ("" when not even two characters fit).
func fitText(name string, width float64) string {
	n := int((width - 6) / charWidth)
	if n < 3 {
		return ""
	}
	r := []rune(name)
	if len(r) <= n {
		return name
	}
	return string(r[:n-2]) + ".."
}

// zoomScript: a click on a frame widens it and its descendants to the full
// width and hides frames outside it; a click on the bottom frame resets.
const zoomScript = `<script type="text/ecmascript"><![CDATA[
(function(){
var W=` + "1200" + `,P=10,g=document.getElementById("frames");
var fs=Array.prototype.slice.call(g.querySelectorAll("g.f"));
fs.forEach(function(f){var r=f.querySelector("rect");f._x=+r.getAttribute("x");f._w=+r.getAttribute("width");f._y=+r.getAttribute("y");
var t=f.querySelector("text");f._n=f.querySelector("title").textContent.replace(/ \([^()]*\)$/,"");if(t)f._t=t.textContent;
f.addEventListener("click",function(){zoom(f);});});
function fit(f,w){var t=f.querySelector("text");var n=Math.floor((w-6)/7.08);if(n<3){if(t)t.textContent="";return;}
if(!t){t=document.createElementNS("http://www.w3.org/2000/svg","text");t.setAttribute("y",f._y+12);f.appendChild(t);}
t.textContent=f._n.length<=n?f._n:f._n.substring(0,n-2)+"..";}
function zoom(z){var s=(W-2*P)/z._w;fs.forEach(function(f){var r=f.querySelector("rect"),t=f.querySelector("text");
var inside=f._x>=z._x-1e-6&&f._x+f._w<=z._x+z._w+1e-6&&f._y<=z._y;var below=f._y>z._y&&f._x<=z._x+1e-6&&f._x+f._w>=z._x+z._w-1e-6;
if(!inside&&!below){f.style.display="none";return;}f.style.display="";
var x=below?P:P+(f._x-z._x)*s,w=below?W-2*P:f._w*s;r.setAttribute("x",x);r.setAttribute("width",w);fit(f,w);
t=f.querySelector("text");if(t)t.setAttribute("x",x+3);});}
})();
]]></script>
`
