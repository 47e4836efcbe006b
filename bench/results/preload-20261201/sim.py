import random, bisect, math
from collections import OrderedDict
N=2064888; S=9500; random.seed(1)
# zipf theta .99 over N items via inverse-CDF on harmonic approx (sample ranks)
theta=0.99
def zeta(n): return sum(1/ (i**theta) for i in range(1,200001)) + ( (n**(1-theta)-200001**(1-theta))/(1-theta) if n>200001 else 0)
Z=zeta(N)
# sample rank r by inverse of continuous approx for r>1000, exact table for small
small=[1/(i**theta) for i in range(1,1001)]; cs=[]; acc=0
for w in small: acc+=w; cs.append(acc)
def rank():
    u=random.random()*Z
    if u<cs[-1]: return bisect.bisect_left(cs,u)
    # continuous: u - cs[-1] = (r^(1-t) - 1000^(1-t))/(1-t)
    r=((u-cs[-1])*(1-theta)+1000**(1-theta))**(1/(1-theta)); return min(int(r),N-1)
pos={}
def position(r):
    if r not in pos: pos[r]=random.randrange(N)
    return pos[r]
scans=[(position(rank()), random.randint(1,100)) for _ in range(S)]
def run(K, ratio, cache=30000):
    lru=OrderedDict(); heat={}; clustered=set(); ios=0
    for p,l in scans:
        chunkreads={}
        for q in range(p,min(p+l,N)):
            if q in lru: lru.move_to_end(q); continue
            c=q//K if K else None
            if K and c in clustered: chunkreads[c]=chunkreads.get(c,0)+1
            else:
                ios+=1
                if K: heat[c]=heat.get(c,0)+1
            lru[q]=1
            if len(lru)>cache: lru.popitem(last=False)
        for c,n in chunkreads.items(): ios+=math.ceil(n/32)  # 128 KiB read-ahead chunks of 1 KiB values
        if K:
            for c in list(heat):
                if c not in clustered and heat[c]>=ratio*K: clustered.add(c); ios+=K/32 # the pass reads+writes
    return ios
base=run(0,1)
print('base ios',base)
for K in (64,256,1024,4096,230000):
    for ratio in (1.0,):
        r=run(K,ratio); print(K,ratio,r,round(base/r,2))
for K,ratio in ((64,0.25),(64,0.05),(256,0.1),(16,0.5)):
    r=run(K,ratio); print(K,ratio,r,round(base/r,2))
