package ring

import (
	"fmt"
	"strconv"
	"strings"
)

// Ordinal is the StatefulSet ordinal in name (an instance id, POD_NAME or
// HOSTNAME): the decimal number after the last '-' of its first DNS label.
// "ring-0.ring-headless.default.svc.cluster.local" -> 0, "switchboard-12"
// -> 12, "a-b-3" -> 3. A name without a '-', with nothing before or after
// it, with a non-digit after it, or that reads as negative ("ring--1") has
// no ordinal.
func Ordinal(name string) (int, error) {
	label, _, _ := strings.Cut(name, ".")
	i := strings.LastIndexByte(label, '-')
	if i < 0 {
		return 0, fmt.Errorf("ordinal of %q: no '-' before a number in %q", name, label)
	}
	base, digits := label[:i], label[i+1:]
	if base == "" || strings.HasSuffix(base, "-") {
		return 0, fmt.Errorf("ordinal of %q: %q is not a name followed by -<number>", name, label)
	}
	if digits == "" || strings.Trim(digits, "0123456789") != "" {
		return 0, fmt.Errorf("ordinal of %q: %q is not a number", name, digits)
	}
	n, err := strconv.Atoi(digits)
	if err != nil {
		return 0, fmt.Errorf("ordinal of %q: %w", name, err)
	}
	return n, nil
}
