package testutil

import "fmt"

// CPF returns a valid CPF (correct check digits) built from nine digits:
// base modulo 10^9, zero-padded, then the two modulus-11 check digits.
// CPF(529982247) is "52998224725".
func CPF(base int) string {
	d := []byte(fmt.Sprintf("%09d", base%1000000000))
	for _, n := range []int{9, 10} {
		sum := 0
		for i := 0; i < n; i++ {
			sum += int(d[i]-'0') * (n + 1 - i)
		}
		r := sum * 10 % 11
		if r == 10 {
			r = 0
		}
		d = append(d, byte('0'+r))
	}
	return string(d)
}

// PunctuatedCPF spells an 11-digit CPF the usual way: "529.982.247-25".
func PunctuatedCPF(c string) string {
	return c[:3] + "." + c[3:6] + "." + c[6:9] + "-" + c[9:]
}
