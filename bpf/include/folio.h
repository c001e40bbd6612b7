/* folio.h: folio helpers shared by BPF programs. Include after common.h. */
#ifndef GALAGO_FOLIO_H
#define GALAGO_FOLIO_H

/* folio_pages is folio_nr_pages: a large folio has PG_head in its flags
 * and keeps its order in the low byte of the second page's flags
 * (_flags_1). flags is an unsigned long, wrapped in a struct
 * (memdesc_flags_t) on newer kernels: read the word at the field's offset. */
static __always_inline __u64 folio_pages(struct folio *folio)
{
	unsigned long flags = 0;

	bpf_probe_read_kernel(&flags, sizeof(flags), (void *)folio + bpf_core_field_offset(folio->flags));
	if (!(flags & (1UL << bpf_core_enum_value(enum pageflags, PG_head))))
		return 1;
	if (!bpf_core_field_exists(folio->_flags_1))
		return 1;
	return 1ULL << (folio->_flags_1 & 0xff);
}

#endif /* GALAGO_FOLIO_H */
