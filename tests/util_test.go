package tests

import "strconv"

func atoi(s string) (int, error) { return strconv.Atoi(s) }

func repeat(c byte, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return b
}

func head(b []byte) []byte {
	if len(b) > 80 {
		return b[:80]
	}
	return b
}
