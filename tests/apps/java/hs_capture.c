/* HsCapture.capture (HsCapture.java): this thread's sample, taken by
 * itself -- registers as an aarch64 perf sample has them (pc, sp, x29, x30;
 * x22, the interpreter's bcp register, is the caller's here: saved by this
 * function's callers, not live) and 16 KB of stack from sp -- written to
 * `path` as "tid pc sp fp lr bcp\n" and the stack's bytes; then it waits
 * on stdin until the recorder has read the JVM's memory. aarch64 only. */
#include <jni.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

JNIEXPORT void JNICALL Java_HsCapture_capture(JNIEnv *env, jclass cls, jstring jpath)
{
	uint64_t sp, fp, lr, pc;
	static uint8_t stack[16384];
	const char *path = (*env)->GetStringUTFChars(env, jpath, NULL);

	(void)cls;
	__asm__ volatile("mov %0, sp" : "=r"(sp));
	__asm__ volatile("mov %0, x29" : "=r"(fp));
	__asm__ volatile("mov %0, x30" : "=r"(lr));
	__asm__ volatile("adr %0, ." : "=r"(pc));
	/* As much of 16 KB as is mapped above sp (the thread's stack ends):
	 * its mapping from /proc/self/maps (qemu-user shows the guest's). */
	size_t got = 0;
	FILE *m = fopen("/proc/self/maps", "r");
	char line[512];
	while (m && fgets(line, sizeof line, m)) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && sp >= lo && sp < hi) {
			got = hi - sp < sizeof stack ? hi - sp : sizeof stack;
			break;
		}
	}
	if (m)
		fclose(m);
	memcpy(stack, (const void *)sp, got);
	FILE *f = fopen(path, "wb");
	if (f && got > 0) {
		fprintf(f, "%ld %lu %lu %lu %lu %lu\n", (long)syscall(SYS_gettid), (unsigned long)pc,
			(unsigned long)sp, (unsigned long)fp, (unsigned long)lr, 0ul);
		fwrite(stack, 1, (size_t)got, f);
	}
	if (f)
		fclose(f);
	char done[64];
	snprintf(done, sizeof done, "%s.ready", path);
	FILE *d = fopen(done, "w");
	if (d)
		fclose(d);
	char c;
	while (read(0, &c, 1) < 0)
		;
	(*env)->ReleaseStringUTFChars(env, jpath, path);
}
