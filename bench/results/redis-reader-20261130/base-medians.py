import sys,statistics,re
cells={}
for d in sys.argv[1:]:
    for line in open(d+'/summary.txt'):
        if not line.startswith('| ') or 'value' in line: continue
        f=[x.strip() for x in line.strip().strip('|').split('|')]
        if len(f)<9 or not f[0].isdigit(): continue
        key=(int(f[0]),int(f[1]),f[2],f[3]); cells.setdefault(key,[]).append(float(f[8]))
for k in sorted(cells, key=lambda k:(k[0],k[1],k[2]!='always',['SET','GET','MSET','INCR'].index(k[3]))):
    v=cells[k]; print(k, "base/redis median %.2f (%.2f-%.2f)"%(statistics.median(v),min(v),max(v)))
