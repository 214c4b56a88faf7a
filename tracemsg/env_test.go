package tracemsg

import (
	"testing"

	"github.com/verdryx/verdryx/internal/jstest"
)

func TestMain(m *testing.M) { jstest.VerifyMain(m) }
