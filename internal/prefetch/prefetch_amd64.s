#include "textflag.h"

// func indexed(base unsafe.Pointer, idxs []int32, shift uint)
// PREFETCHT0 base + sign-extended idx << shift, for each idx; len(idxs) > 0.
TEXT ·indexed(SB), NOSPLIT, $0-40
	MOVQ base+0(FP), AX
	MOVQ idxs_base+8(FP), SI
	MOVQ idxs_len+16(FP), BX
	MOVQ shift+32(FP), CX

iloop:
	MOVLQSX (SI), DX
	SHLQ CX, DX
	PREFETCHT0 (AX)(DX*1)
	ADDQ $4, SI
	DECQ BX
	JNZ  iloop
	RET

// func hashed(base unsafe.Pointer, hashes []uint64, mask uint64, shift uint)
// PREFETCHT0 base + (h & mask) << shift, for each h; len(hashes) > 0.
TEXT ·hashed(SB), NOSPLIT, $0-48
	MOVQ base+0(FP), AX
	MOVQ hashes_base+8(FP), SI
	MOVQ hashes_len+16(FP), BX
	MOVQ mask+32(FP), DI
	MOVQ shift+40(FP), CX

hloop:
	MOVQ (SI), DX
	ANDQ DI, DX
	SHLQ CX, DX
	PREFETCHT0 (AX)(DX*1)
	ADDQ $8, SI
	DECQ BX
	JNZ  hloop
	RET
