#include "textflag.h"

// func dotAVX2(a, b *float32, n int) float32
// Requires AVX2 and FMA. Two 8-lane accumulators, 16 floats per step, then
// 8 at a time into the first, then a scalar tail after the reduction.
// dot4AVX2 repeats exactly this sequence per query, so both give
// bit-identical results.
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ a+0(FP), SI
	MOVQ b+8(FP), DI
	MOVQ n+16(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1

loop16:
	CMPQ CX, $16
	JL   loop8
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	VFMADD231PS (DI), Y8, Y0
	VFMADD231PS 32(DI), Y9, Y1
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  loop16

loop8:
	CMPQ CX, $8
	JL   reduce
	VMOVUPS (SI), Y8
	VFMADD231PS (DI), Y8, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  loop8

reduce:
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0

tail:
	TESTQ CX, CX
	JE    done
	VMOVSS (SI), X1
	VFMADD231SS (DI), X1, X0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JMP  tail

done:
	VZEROUPPER
	MOVSS X0, ret+24(FP)
	RET

// func dot4AVX2(row, q0, q1, q2, q3 *float32, n int, out *[4]float32)
// Requires AVX2 and FMA. Scores one row against four queries, loading
// each row element once; per query the operations are those of dotAVX2.
TEXT ·dot4AVX2(SB), NOSPLIT, $0-56
	MOVQ row+0(FP), SI
	MOVQ q0+8(FP), R8
	MOVQ q1+16(FP), R9
	MOVQ q2+24(FP), R10
	MOVQ q3+32(FP), R11
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ BX, BX

q4loop16:
	CMPQ CX, $16
	JL   q4loop8
	VMOVUPS (SI)(BX*1), Y8
	VMOVUPS 32(SI)(BX*1), Y9
	VFMADD231PS (R8)(BX*1), Y8, Y0
	VFMADD231PS 32(R8)(BX*1), Y9, Y1
	VFMADD231PS (R9)(BX*1), Y8, Y2
	VFMADD231PS 32(R9)(BX*1), Y9, Y3
	VFMADD231PS (R10)(BX*1), Y8, Y4
	VFMADD231PS 32(R10)(BX*1), Y9, Y5
	VFMADD231PS (R11)(BX*1), Y8, Y6
	VFMADD231PS 32(R11)(BX*1), Y9, Y7
	ADDQ $64, BX
	SUBQ $16, CX
	JMP  q4loop16

q4loop8:
	CMPQ CX, $8
	JL   q4reduce
	VMOVUPS (SI)(BX*1), Y8
	VFMADD231PS (R8)(BX*1), Y8, Y0
	VFMADD231PS (R9)(BX*1), Y8, Y2
	VFMADD231PS (R10)(BX*1), Y8, Y4
	VFMADD231PS (R11)(BX*1), Y8, Y6
	ADDQ $32, BX
	SUBQ $8, CX
	JMP  q4loop8

q4reduce:
	VADDPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0
	VADDPS Y3, Y2, Y2
	VEXTRACTF128 $1, Y2, X3
	VADDPS X3, X2, X2
	VHADDPS X2, X2, X2
	VHADDPS X2, X2, X2
	VADDPS Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VHADDPS X4, X4, X4
	VHADDPS X4, X4, X4
	VADDPS Y7, Y6, Y6
	VEXTRACTF128 $1, Y6, X7
	VADDPS X7, X6, X6
	VHADDPS X6, X6, X6
	VHADDPS X6, X6, X6

q4tail:
	TESTQ CX, CX
	JE    q4done
	VMOVSS (SI)(BX*1), X8
	VFMADD231SS (R8)(BX*1), X8, X0
	VFMADD231SS (R9)(BX*1), X8, X2
	VFMADD231SS (R10)(BX*1), X8, X4
	VFMADD231SS (R11)(BX*1), X8, X6
	ADDQ $4, BX
	DECQ CX
	JMP  q4tail

q4done:
	VZEROUPPER
	MOVSS X0, 0(DX)
	MOVSS X2, 4(DX)
	MOVSS X4, 8(DX)
	MOVSS X6, 12(DX)
	RET

// func sumAVX(a *float32, n int) float32
// Requires AVX. Four 8-lane accumulators, 32 floats per step.
TEXT ·sumAVX(SB), NOSPLIT, $0-20
	MOVQ a+0(FP), SI
	MOVQ n+8(FP), CX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3

sloop32:
	CMPQ CX, $32
	JL   sreduce
	VADDPS (SI), Y0, Y0
	VADDPS 32(SI), Y1, Y1
	VADDPS 64(SI), Y2, Y2
	VADDPS 96(SI), Y3, Y3
	ADDQ $128, SI
	SUBQ $32, CX
	JMP  sloop32

sreduce:
	VADDPS Y1, Y0, Y0
	VADDPS Y3, Y2, Y2
	VADDPS Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS X1, X0, X0
	VHADDPS X0, X0, X0
	VHADDPS X0, X0, X0

stail:
	TESTQ CX, CX
	JE    sdone
	VADDSS (SI), X0, X0
	ADDQ $4, SI
	DECQ CX
	JMP  stail

sdone:
	VZEROUPPER
	MOVSS X0, ret+16(FP)
	RET
