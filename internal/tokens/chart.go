package tokens

import (
	"fmt"
	"html"
	"io"
	"strings"

	"github.com/govalues/decimal"
)

// Series is what a chart draws: labelled points, y in money.
type Series struct {
	Title  string
	XLabel string
	YLabel string
	Labels []string          // one per point, shown under the x axis (thinned)
	Values []decimal.Decimal // y values
	Bars   bool              // bars (per day) or a line (per repeat rate)
}

// WriteSVG draws s as a standalone SVG that any browser renders. It is
// written by hand: the charts are two simple shapes, not worth a plotting
// dependency.
func WriteSVG(w io.Writer, s Series, l Locale) error {
	const (
		width, height = 720, 360
		left, right   = 90, 20
		top, bottom   = 40, 60
	)
	plotW, plotH := float64(width-left-right), float64(height-top-bottom)
	maxY := 0.0
	ys := make([]float64, len(s.Values))
	for i, v := range s.Values {
		f, _ := v.Float64() // display only: pixels, not money
		ys[i] = f
		maxY = max(maxY, f)
	}
	if maxY == 0 {
		maxY = 1
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="16" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(s.Title))
	// Axes and horizontal grid with four labelled levels.
	for i := 0; i <= 4; i++ {
		y := float64(top) + plotH*float64(i)/4
		val := maxY * float64(4-i) / 4
		label := l.Number(decimal.MustParse(fmt.Sprintf("%.2f", val)), 2)
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", left, y, width-right, y)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y+4, html.EscapeString(label))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, height-bottom, width-right, height-bottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, height-bottom)
	n := len(ys)
	every := max(1, n/10)
	xAt := func(i int) float64 {
		if s.Bars {
			return float64(left) + plotW*(float64(i)+0.5)/float64(max(n, 1))
		}
		return float64(left) + plotW*float64(i)/float64(max(n-1, 1))
	}
	yAt := func(v float64) float64 { return float64(top) + plotH*(1-v/maxY) }
	if s.Bars {
		bw := plotW / float64(max(n, 1)) * 0.7
		for i, v := range ys {
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#c0392b"><title>%s: %s</title></rect>`+"\n",
				xAt(i)-bw/2, yAt(v), bw, float64(height-bottom)-yAt(v), html.EscapeString(s.Labels[i]), html.EscapeString(l.Number(s.Values[i], 2)))
		}
	} else if n > 0 {
		var pts []string
		for i, v := range ys {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", xAt(i), yAt(v)))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="#c0392b" stroke-width="2"/>`+"\n", strings.Join(pts, " "))
	}
	for i := 0; i < n; i += every {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", xAt(i), height-bottom+18, html.EscapeString(s.Labels[i]))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", float64(left)+plotW/2, height-14, html.EscapeString(s.XLabel))
	fmt.Fprintf(&b, `<text x="16" y="%.1f" text-anchor="middle" transform="rotate(-90 16 %.1f)">%s</text>`+"\n", float64(top)+plotH/2, float64(top)+plotH/2, html.EscapeString(s.YLabel))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
