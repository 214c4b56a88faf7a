#include "textflag.h"

// The int8 kernels. Each sets out[i] to the exact int32 dot product of the
// first dlen int8 codes of row i (rows stride bytes apart) with the query's
// codes, for nrows rows. dlen is a multiple of 64. Integer arithmetic: all
// kernels agree exactly with each other and with dotsGeneric.

// func dotsVNNI(rows *int8, stride, nrows int, qu *uint8, dlen int, out *int32)
// Requires AVX512F, AVX512BW and AVX512_VNNI. qu holds the query's codes
// plus 128 (unsigned); VPDPBUSD sums u8*s8 products four at a time into
// int32 lanes, so a second accumulator sums the row's codes (times ones)
// and 128 times that is subtracted at the end.
TEXT ·dotsVNNI(SB), NOSPLIT, $0-48
	MOVQ rows+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ nrows+16(FP), R9
	MOVQ qu+24(FP), DI
	MOVQ dlen+32(FP), R10
	MOVQ out+40(FP), DX
	MOVL $0x01010101, AX
	VPBROADCASTD AX, Z31

vrow:
	TESTQ R9, R9
	JE    vdone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	XORQ   BX, BX

vloop128:
	LEAQ 128(BX), CX
	CMPQ CX, R10
	JG   vloop64
	VMOVDQU8 (SI)(BX*1), Z6
	VMOVDQU8 64(SI)(BX*1), Z7
	VMOVDQU8 (DI)(BX*1), Z2
	VMOVDQU8 64(DI)(BX*1), Z3
	VPDPBUSD Z6, Z2, Z0
	VPDPBUSD Z7, Z3, Z4
	VPDPBUSD Z6, Z31, Z1
	VPDPBUSD Z7, Z31, Z5
	MOVQ CX, BX
	JMP  vloop128

vloop64:
	CMPQ BX, R10
	JGE  vreduce
	VMOVDQU8 (SI)(BX*1), Z6
	VMOVDQU8 (DI)(BX*1), Z2
	VPDPBUSD Z6, Z2, Z0
	VPDPBUSD Z6, Z31, Z1
	ADDQ $64, BX
	JMP  vloop64

vreduce:
	VPADDD Z4, Z0, Z0
	VPADDD Z5, Z1, Z1
	VPSLLD $7, Z1, Z1
	VPSUBD Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y2
	VPADDD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X2
	VPADDD X2, X0, X0
	VPSHUFD $0x4E, X0, X2
	VPADDD X2, X0, X0
	VPSHUFD $0xB1, X0, X2
	VPADDD X2, X0, X0
	VMOVD X0, AX
	MOVL AX, (DX)
	ADDQ $4, DX
	ADDQ R8, SI
	DECQ R9
	JMP  vrow

vdone:
	VZEROUPPER
	RET

// func dotsAVX512BW(rows *int8, stride, nrows int, q16 *int16, dlen int, out *int32)
// Requires AVX512F and AVX512BW. Row codes are sign-extended to int16 and
// multiplied with the widened query by VPMADDWD (pairs summed into int32,
// exact), 64 codes per step.
TEXT ·dotsAVX512BW(SB), NOSPLIT, $0-48
	MOVQ rows+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ nrows+16(FP), R9
	MOVQ q16+24(FP), DI
	MOVQ dlen+32(FP), R10
	MOVQ out+40(FP), DX

brow:
	TESTQ R9, R9
	JE    bdone
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	XORQ   BX, BX

bloop:
	CMPQ BX, R10
	JGE  breduce
	VPMOVSXBW (SI)(BX*1), Z2
	VPMOVSXBW 32(SI)(BX*1), Z3
	VPMADDWD (DI)(BX*2), Z2, Z2
	VPMADDWD 64(DI)(BX*2), Z3, Z3
	VPADDD Z2, Z0, Z0
	VPADDD Z3, Z1, Z1
	ADDQ $64, BX
	JMP  bloop

breduce:
	VPADDD Z1, Z0, Z0
	VEXTRACTI64X4 $1, Z0, Y2
	VPADDD Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X2
	VPADDD X2, X0, X0
	VPSHUFD $0x4E, X0, X2
	VPADDD X2, X0, X0
	VPSHUFD $0xB1, X0, X2
	VPADDD X2, X0, X0
	VMOVD X0, AX
	MOVL AX, (DX)
	ADDQ $4, DX
	ADDQ R8, SI
	DECQ R9
	JMP  brow

bdone:
	VZEROUPPER
	RET

// func dotsAVX2(rows *int8, stride, nrows int, q16 *int16, dlen int, out *int32)
// Requires AVX2. As dotsAVX512BW with 256-bit vectors, 32 codes per step.
TEXT ·dotsAVX2(SB), NOSPLIT, $0-48
	MOVQ rows+0(FP), SI
	MOVQ stride+8(FP), R8
	MOVQ nrows+16(FP), R9
	MOVQ q16+24(FP), DI
	MOVQ dlen+32(FP), R10
	MOVQ out+40(FP), DX

arow:
	TESTQ R9, R9
	JE    adone
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	XORQ  BX, BX

aloop:
	CMPQ BX, R10
	JGE  areduce
	VPMOVSXBW (SI)(BX*1), Y2
	VPMOVSXBW 16(SI)(BX*1), Y3
	VPMADDWD (DI)(BX*2), Y2, Y2
	VPMADDWD 32(DI)(BX*2), Y3, Y3
	VPADDD Y2, Y0, Y0
	VPADDD Y3, Y1, Y1
	ADDQ $32, BX
	JMP  aloop

areduce:
	VPADDD Y1, Y0, Y0
	VEXTRACTI128 $1, Y0, X2
	VPADDD X2, X0, X0
	VPSHUFD $0x4E, X0, X2
	VPADDD X2, X0, X0
	VPSHUFD $0xB1, X0, X2
	VPADDD X2, X0, X0
	VMOVD X0, AX
	MOVL AX, (DX)
	ADDQ $4, DX
	ADDQ R8, SI
	DECQ R9
	JMP  arow

adone:
	VZEROUPPER
	RET
