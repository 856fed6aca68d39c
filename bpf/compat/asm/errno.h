/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libbpf's usdt.bpf.h includes <linux/errno.h>, which wants the target's
 * <asm/errno.h>; a BPF compile has no target multiarch include directory.
 * Every architecture jankbpf builds for uses the generic error numbers.
 */
#include <asm-generic/errno.h>
