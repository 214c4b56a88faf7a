package embedded

import (
	"testing"

	"github.com/verdryx/verdryx/internal/jstest"
)

func TestMain(m *testing.M) { jstest.VerifyMain(m) }
